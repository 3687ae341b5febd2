"""One module per subcommand; ``opscreen.cli`` discovers them."""
