"""Paper reproductions: ``utilon reproduce <paper>`` prints each paper's tables with its numbers
beside ours and writes the figures (docs/reproduction-*.md discuss the differences)."""
