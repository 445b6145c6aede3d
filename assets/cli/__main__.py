from assets.cli import main

main()
