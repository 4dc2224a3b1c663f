from jetfleet.cli.entry import main

main()
