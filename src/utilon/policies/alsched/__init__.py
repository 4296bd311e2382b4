"""alsched: algebraic scheduling with composable utility functions (Tumanov et al., SoCC 2012).

``lang`` is the utility language (AST, prefix syntax, printer, builder, structured form,
equivalence classes and requests); ``solvers`` maximise total utility over pending requests
(greedy, branch-and-bound, MILP); ``policy`` is the ``alsched`` scheduling policy with the
Soft / Hard / None constraint handling of §5.2; ``jobs`` builds §5.1's job types.
"""
