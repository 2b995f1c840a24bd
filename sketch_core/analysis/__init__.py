"""Static analyses of query plans, apart from the rewrites they license: whether a sketch on an
attribute is safe for a query (:mod:`.safety`, PBDS Sec. 6), whether a sketch captured for one
binding of a template holds for another (:mod:`.reuse`, PBDS Sec. 7), both decided with z3
(:mod:`.smt`)."""
