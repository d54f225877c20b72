"""One module per `sottovoce` subcommand. Each exposes ``add_parser(subparsers)`` and
``run(args) -> int``; `app.cli` imports them lazily so a thin install only needs what it runs."""
