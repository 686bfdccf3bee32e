"""Tools around the broker: the admin subcommands and the client they use."""
