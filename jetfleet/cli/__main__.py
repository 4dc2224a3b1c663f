from jetfleet.cli.main import cli

cli()
