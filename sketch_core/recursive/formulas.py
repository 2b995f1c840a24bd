"""Absorption provenance as Boolean formulas (Liu et al., Sec. 4 and 4.1).

Every base tuple gets a variable, true while the tuple is in its table. A derived tuple's
formula is the OR over its derivations of the AND of the variables they use (the Boolean
specialisation of provenance, the paper's Figure 6); the tuple is in the view exactly when its
formula is true. Formulas are reduced ordered BDDs: the form is canonical, so absorption
(``a and (a or b) = a``) happens by itself, equal formulas are the same node, and a deleted base
tuple is removed from every formula by setting its variable to false (``let``, the paper's
``restrict``): a tuple whose formula becomes false has no derivation left, with no re-derivation.

Example: with edges p1 = (A, B), p2 = (B, C), p4 = (C, B), reachable (B, B) has the formula
``p2 ∧ p4``; deleting p4 makes it false, and (B, B) leaves the view; (A, C) keeps ``p1 ∧ p2``.

The BDDs come from ``dd``: its CUDD binding (``dd.cudd``, in the wheels for common platforms)
where it imports, else its pure-Python one (``dd.autoref``), with the same results.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

try:
    from dd import cudd as _backend
except ImportError:  # pragma: no cover  (a platform without dd's compiled wheel)
    from dd import autoref as _backend

Formula = Any  # a BDD node of the manager that made it
BACKEND = _backend.__name__


class Formulas:
    """One BDD manager and the variables of the base tuples it has seen (by key: any hashable
    that names a base tuple, for example ``(table, row values)``)."""

    def __init__(self, reordering: bool = True) -> None:
        """``reordering``: CUDD's dynamic variable reordering (sifting), which keeps wide
        formulas (reachability's) small, and costs more than it saves on narrow ones (one
        path's conjunction, under an aggregate selection: four to five times the time)."""
        self._bdd = _backend.BDD()
        if BACKEND == "dd.cudd":
            self._bdd.configure(reordering=reordering)
        self._names: dict[Hashable, str] = {}
        self._keys: dict[str, Hashable] = {}
        self._declared = 0  # variables are v0, v1, ...: the next one's number
        self.true: Formula = self._bdd.true
        self.false: Formula = self._bdd.false

    def variable(self, key: Hashable) -> Formula:
        """The formula that is true while the base tuple ``key`` exists (a new variable the
        first time; the same one after the tuple was deleted and inserted again, as no formula
        mentions it any more)."""
        name = self._names.get(key)
        if name is None:
            name = f"v{self._declared}"
            self.adopt(key, name)
        return self._bdd.var(name)

    def adopt(self, key: Hashable, name: str) -> None:
        """Make ``name`` the variable of base tuple ``key`` (restoring stored formulas)."""
        self._bdd.declare(name)
        self._names[key] = name
        self._keys[name] = key
        self._declared = max(self._declared, int(name[1:]) + 1)

    def name_of(self, key: Hashable) -> str | None:
        """The variable of base tuple ``key``, if it has one."""
        return self._names.get(key)

    def node(self, name: str, high: Formula, low: Formula) -> Formula:
        """``high`` where variable ``name`` is true, else ``low`` (rebuilding stored nodes)."""
        return self._bdd.ite(self._bdd.var(name), high, low)

    def conjunction(self, keys: Iterable[Hashable]) -> Formula:
        """The formula of one derivation from the base tuples ``keys``."""
        out = self.true
        for key in keys:
            out &= self.variable(key)
        return out

    def difference(self, new: Formula, old: Formula) -> Formula:
        """The derivations ``new`` has and ``old`` has not (``new and not old``)."""
        return new & ~old

    def without(self, formula: Formula, keys: Iterable[Hashable]) -> Formula:
        """``formula`` with the base tuples ``keys`` deleted (their variables false)."""
        names = {self._names[k]: False for k in keys if k in self._names}
        return self._bdd.let(names, formula) if names else formula

    def keys(self, formula: Formula) -> set[Hashable]:
        """The base tuples ``formula`` depends on: those of its minimal derivations."""
        return {self._keys[name] for name in self._support(formula)}

    def _support(self, formula: Formula) -> set[str]:
        """``formula``'s variables. dd's ``support`` turns CUDD's answer into names by a loop
        over every declared variable (half a millisecond at 7,000): a walk over the formula's
        own nodes is what a small formula (one path's links, say) needs instead."""
        if BACKEND != "dd.cudd" or formula.dag_size * 4 > self._declared:
            return set(self._bdd.support(formula))
        names: set[str] = set()
        seen: set[int] = set()
        stack = [formula]
        while stack:
            node = stack.pop()
            if node == self.true or node == self.false:
                continue
            regular = ~node if node.negated else node
            if int(regular) in seen:
                continue
            seen.add(int(regular))
            names.add(regular.var)
            stack += [regular.low, regular.high]
        return names

    def holds(self, formula: Formula, present: set[Hashable]) -> bool:
        """Whether ``formula`` is true when exactly the base tuples ``present`` exist."""
        values = {name: key in present for name, key in self._keys.items()}
        support = self._support(formula)
        return bool(self._bdd.let({n: values[n] for n in support}, formula) == self.true)

    def nodes(self) -> int:
        """The live nodes of every formula of this manager (shared nodes once)."""
        return len(self._bdd)

    def size(self, formula: Formula) -> int:
        """The formula's node count (its state size)."""
        return int(formula.dag_size)
