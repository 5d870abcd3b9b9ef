"""CLI sub-commands, one module each (see ``pcspec.cli``)."""
