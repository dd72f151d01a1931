"""One module per command group; each `add_<command>(commands)` adds a parser and its handler.

The service is opened inside the handlers (`cli.context.open_service`), and the TUI and HTTP
server are imported only by the commands that start them (`serve`)."""
