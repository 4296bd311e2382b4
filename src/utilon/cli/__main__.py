"""``python -m utilon.cli``: the same as the ``utilon`` command."""

from utilon.cli import main

main()
