r"""Joins and flat maps: the FROM clause of several tables as one private relation.

A query may join private tables, public tables and flat maps (``UNNEST``) with inner equi-joins
(``JOIN … ON``, ``JOIN … USING``, or a comma list with equalities in WHERE). The result is a
*joined relation* that the rest of dpproxy treats like one private table (``Table``): its
columns are the joined tables' columns, and every joined row carries exactly one privacy unit.

Why one unit per row is enough (``../shared/reading/002_*``, protected change AddRowsWithID):

* the neighbouring relation adds or removes one unit **together with its rows in every private
  table**; a row of a table with ``privacy_unit: {via: COLUMN, references: TABLE.KEY}`` belongs
  to the unit of the row it references (``KEY`` is unique in ``TABLE``);
* each private table in the join gets its row's unit — its own unit column, or the unit reached
  through the references (joining the referenced tables in the rewritten SQL when the query
  does not) — and the join conditions must make all of them *equal* (the same equivalence class
  of ``=`` conditions). So a joined row combines rows of one unit only, plus public rows and
  flat-map elements, which are the same in both neighbours;
* hence the joined relations of two neighbours differ exactly in the rows of the one unit that
  differs. The rewrite then keeps at most τ rows per unit of the joined relation with the keyed
  hash of ``rewrite/bound.py`` (a stable transformation), and every sensitivity of
  ``analysis/sensitivity.py`` holds with K = τ — whatever the fan-out of the joins really is.

τ is the schema's bound when every table in the join declares one (:attr:`JoinSource.derived`:
the rows of one unit in the root table times each further table's fan-out — 1 through a unique
key, the most rows per value of a public table's join column, read from the public data, or the
declared rows per unit of a private table), otherwise it is chosen with DP per query
(``planning/truncation.py``) or given by a hint.

Two units: when the private tables fall into exactly two classes of units (``people p JOIN
shops s ON p.city = s.city``), each joined row holds two people's rows;
:func:`dpproxy.sql.twounits.two_units` builds reading/002's private join with truncation per join
key instead (see there).

Outer joins (LEFT, RIGHT, FULL) are recorded here and built by ``sql/outer.py``.

Refused: natural, semi/anti and cross joins (every table must be connected to the
others by an equality), a private table twice (self-joins), joins that mix more than two
units, two units joined together with public tables or flat maps, joins inside subqueries of
a join, and flat maps over anything but a split string.
"""

from __future__ import annotations

from sqlglot import exp

from dpproxy.catalog.model import Catalog, Column, ColumnType, ContributionBound, Table
from dpproxy.errors import AmbiguousColumn, Forbidden, UndefinedTable, UnsupportedQuery
from dpproxy.sql.joinparts import (
    UNIT_OF_ROW,
    Instance,
    JoinSource,
    OuterJoin,
    UnionFind,
    column_of,
    conjuncts,
    derived_bound,
    has_column,
    slice_bounds,
)
from dpproxy.sql.joinrel import check_connected, from_where, unit_unique, virtual_columns
from dpproxy.sql.twounits import two_units

MAX_INSTANCES = 12


def needs_join(select: exp.Select, catalog: Catalog) -> bool:
    """Must this SELECT's FROM go through the join analysis?"""
    if select.args.get("joins"):
        return True
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table):
        return False
    t = catalog.table(from_.this.name)
    return t is not None and t.private and t.unit_via is not None


class JoinBuilder:
    """Collects the FROM items and equalities of one SELECT and builds the joined relation."""

    def __init__(self, select: exp.Select, catalog: Catalog, ctes: dict[str, exp.Expression]):
        self.catalog = catalog
        self.ctes = ctes
        self.instances: list[Instance] = []
        self.uf = UnionFind()
        self.edges: list[tuple[tuple[str, str], tuple[str, str]]] = []
        self.flat_links: list[tuple[str, str]] = []  # (flat map, the table whose column it splits)
        self.filters: list[exp.Expression] = []  # ON conjuncts other than join equalities
        self.outer: list[OuterJoin] = []  # LEFT/RIGHT/FULL joins, built by sql/outer.py
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise UnsupportedQuery("a query must read a table (FROM is missing)")
        self._add_item(from_.this)
        for join in select.args.get("joins") or []:
            self._add_join(join)
        where = select.args.get("where")
        for c in conjuncts(where.this if where is not None else None):
            self._equality(c, from_where=True)

    # -- FROM items ----------------------------------------------------------------------

    def _add_item(self, item: exp.Expression) -> Instance:
        if isinstance(item, exp.Lateral):
            item = item.this
        if isinstance(item, exp.Unnest):
            return self._add_unnest(item)
        if isinstance(item, exp.Subquery):
            raise UnsupportedQuery(
                "subqueries inside a join are not supported",
                hint="join the tables directly and filter in the WHERE clause",
            )
        if not isinstance(item, exp.Table):
            raise UnsupportedQuery(f"unsupported FROM item: {item.sql('postgres')[:80]}")
        if item.args.get("db") or item.args.get("catalog"):
            if item.db.lower() not in ("public", "main"):
                raise UndefinedTable(f'relation "{item.sql("postgres")}" does not exist')
        name = item.name.lower()
        if name in self.ctes and not item.db:
            raise UnsupportedQuery(
                "a CTE inside a join is not supported",
                hint="join the tables directly and filter in the WHERE clause",
            )
        table = self.catalog.table(name)
        if table is None:
            raise UndefinedTable(
                f'relation "{item.name}" does not exist',
                hint="tables: " + ", ".join(t.name for t in self.catalog.tables),
            )
        alias = item.alias_or_name.lower()
        if table.private and any(
            i.table is not None and i.table.name == table.name for i in self.instances
        ):
            raise UnsupportedQuery(
                f'self-joins are not supported: the private table "{table.name}" appears twice',
                hint="one unit's rows joined with themselves have no useful bound",
            )
        return self._register(Instance(alias, table))

    def _register(self, inst: Instance) -> Instance:
        if any(i.alias == inst.alias for i in self.instances):
            raise AmbiguousColumn(f'table name "{inst.alias}" specified more than once')
        if len(self.instances) >= MAX_INSTANCES:
            raise UnsupportedQuery(f"a join of more than {MAX_INSTANCES} tables")
        self.instances.append(inst)
        return inst

    def _add_unnest(self, item: exp.Unnest) -> Instance:
        args = item.expressions
        requested: int | None = None
        first = 1  # the first element used (1-based), from a slice in the query
        if len(args) == 1 and isinstance(args[0], exp.Bracket):
            first, requested = slice_bounds(args[0])
            inner = args[0].this
            args = [inner.this if isinstance(inner, exp.Paren) else inner]
        if len(args) != 1 or not isinstance(
            args[0], exp.StringToArray | exp.Split | exp.Anonymous | exp.RegexpSplit
        ):
            raise UnsupportedQuery(
                "UNNEST is supported over a split string only",
                hint="UNNEST(string_to_array(column, ',')) AS t(element)",
            )
        arg = args[0]
        if isinstance(arg, exp.Anonymous) and arg.name.lower() not in ("string_split",):
            raise UnsupportedQuery(
                f"UNNEST over {arg.name}() is not supported",
                hint="UNNEST(string_to_array(column, ',')) AS t(element)",
            )
        parts = (
            arg.expressions
            if isinstance(arg, exp.Anonymous)
            else [arg.this, arg.args.get("expression")]
        )
        if (
            len(parts) != 2
            or not isinstance(parts[0], exp.Column)
            or not isinstance(parts[1], exp.Literal)
            or not parts[1].is_string
        ):
            raise UnsupportedQuery(
                "UNNEST splits one column by a literal separator",
                hint="UNNEST(string_to_array(column, ',')) AS t(element)",
            )
        alias = item.args.get("alias")
        if alias is None:
            raise UnsupportedQuery("give the UNNEST a name: UNNEST(…) AS t(element)")
        columns = alias.args.get("columns") or []
        name = alias.name.lower() if alias.this else ""
        element = columns[0].name.lower() if columns else name
        if not element:
            raise UnsupportedQuery("give the UNNEST a name: UNNEST(…) AS t(element)")
        owner = self._owner(parts[0])
        if owner is None:
            raise UnsupportedQuery(
                f'UNNEST must split a column of a table before it: "{parts[0].sql("postgres")}"'
            )
        column = column_of(self._inst(owner[0]), owner[1])
        if column.type is not ColumnType.TEXT:
            raise UnsupportedQuery(f'UNNEST splits text; "{column.name}" is {column.type.value}')
        split: exp.Expression = exp.StringToArray(
            this=exp.column(column.name, table=owner[0]), expression=parts[1].copy()
        )
        limits = [m for m in (requested, column.max_elements) if m is not None]
        most = min(limits) if limits else None
        if most is not None:  # keep ``most`` elements of each row, from the ``first``
            split = exp.Bracket(
                this=exp.Paren(this=split),
                expressions=[
                    exp.Slice(
                        this=exp.Literal.number(first),
                        expression=exp.Literal.number(first + most - 1),
                    )
                ],
            )
        inst = self._register(
            Instance(name or element, None, unnest=split, element=element, fan_out=most)
        )
        self.flat_links.append((inst.alias, owner[0]))
        return inst

    def _add_join(self, join: exp.Join) -> None:
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        method = (join.args.get("method") or "").upper()
        if method == "NATURAL":
            raise UnsupportedQuery("NATURAL JOIN is not supported; name the columns (USING)")
        if kind in ("SEMI", "ANTI", "ASOF", "POSITIONAL"):
            raise UnsupportedQuery(f"{kind} JOIN is not supported")
        target = join.this
        is_flat = isinstance(target, exp.Unnest) or (
            isinstance(target, exp.Lateral) and isinstance(target.this, exp.Unnest)
        )
        if isinstance(target, exp.Lateral) and not is_flat:
            raise UnsupportedQuery("LATERAL is supported with UNNEST only")
        inst = self._add_item(target)
        if side:  # analysed by sql/outer.py: ON holds column equalities only
            start = len(self.edges)
            for c in conjuncts(join.args.get("on")):
                if not self._equality(c, from_where=False):
                    raise UnsupportedQuery(
                        f"the ON clause of a {side} JOIN may hold equalities between columns of "
                        f"the joined tables only, not {c.sql('postgres')[:60]}",
                        hint="filter in the WHERE clause, or aggregate per unit in a subquery",
                    )
            for ident in join.args.get("using") or []:
                self._using(ident.name.lower(), inst)
            if is_flat or inst.unnest is not None:
                raise UnsupportedQuery(f"{side} JOIN of UNNEST is not supported")
            self.outer.append(OuterJoin(side, inst.alias, tuple(self.edges[start:])))
            return
        if on := join.args.get("on"):
            for c in conjuncts(on):
                if not self._equality(c, from_where=False):
                    self.filters.append(c)
        for ident in join.args.get("using") or []:
            self._using(ident.name.lower(), inst)

    def _using(self, column: str, right: Instance) -> None:
        left = [
            i
            for i in self.instances
            if i is not right and i.table is not None and i.table.column(column) is not None
        ]
        if right.table is None or right.table.column(column) is None or not left:
            raise UnsupportedQuery(f'column "{column}" of USING must be in both joined tables')
        if len(left) > 1:
            raise AmbiguousColumn(f'common column name "{column}" appears more than once')
        self._edge((left[0].alias, column), (right.alias, column))

    # -- equalities ----------------------------------------------------------------------

    def _owner(self, col: exp.Column) -> tuple[str, str] | None:
        """(alias, column) of a column reference, if it names exactly one instance's column."""
        name = col.name.lower()
        if col.table:
            for i in self.instances:
                if i.alias == col.table.lower():
                    return (i.alias, name) if has_column(i, name) else None
            return None
        owners = [i for i in self.instances if has_column(i, name)]
        return (owners[0].alias, name) if len(owners) == 1 else None

    def _equality(self, cond: exp.Expression, *, from_where: bool) -> bool:
        """Record ``a.x = b.y`` between two tables as a join edge; is ``cond`` one?

        Equalities in WHERE are also kept as filters (the validator resolves the whole WHERE),
        which repeats them harmlessly on the joined rows."""
        if not isinstance(cond, exp.EQ):
            return False
        a, b = cond.this, cond.expression
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            return False
        oa, ob = self._owner(a), self._owner(b)
        if oa is None or ob is None or oa[0] == ob[0]:
            return False
        self._edge(oa, ob)
        return True

    def _edge(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        self.uf.union(a, b)
        self.edges.append((a, b))

    # -- units ---------------------------------------------------------------------------

    def _unit_of(self, inst: Instance, depth: int = 0) -> tuple[str, str]:
        """The (alias, column) holding this private instance's unit, joining tables as needed."""
        assert inst.table is not None
        t = inst.table
        if t.unit_via is None:
            assert t.privacy_unit is not None
            return (inst.alias, t.privacy_unit.lower())
        if depth > 8:
            raise UnsupportedQuery("the privacy unit's references are nested too deeply")
        via = t.unit_via
        ref = self.uf.find((inst.alias, via.column.lower()))
        for other in self.instances:
            if (
                other.table is not None
                and other.table.name.lower() == via.table.lower()
                and self.uf.find((other.alias, via.key.lower())) == ref
            ):
                return self._unit_of(other, depth + 1)
        target = self.catalog.table(via.table)
        assert target is not None  # the loader checked the references
        hidden = self._register(Instance(f"__via{len(self.instances)}", target, hidden=True))
        self._edge((inst.alias, via.column.lower()), (hidden.alias, via.key.lower()))
        return self._unit_of(hidden, depth + 1)

    # -- the relation --------------------------------------------------------------------

    def build(self) -> tuple[Table, JoinSource, dict[str, exp.Expression], set[str]]:
        """The joined relation: its table, its SQL, the visible names and the ambiguous ones."""
        private = [i for i in self.instances if i.table is not None and i.table.private]
        if not private:
            raise UnsupportedQuery(
                "the join reads public tables only: a query answered with differential "
                "privacy must join a private table",
                hint="a query that reads public tables only (no private table in any subquery "
                "or CTE either) is answered exactly, at no cost",
            )
        units = {i.alias: self._unit_of(i) for i in list(private)}
        classes = {self.uf.find(u) for u in units.values()}
        if len(classes) == 2:
            check_connected(self.instances, self.edges, self.flat_links)
            return two_units(
                self.instances,
                self.edges,
                self.flat_links,
                self.uf,
                self.catalog,
                units,
                self._unit_of,
            )
        if len(classes) != 1:
            names = ", ".join(sorted(i.table.name for i in private if i.table is not None))
            raise Forbidden(
                f"the join does not match the privacy unit of {names}: joined rows would "
                "mix the rows of more than two people",
                hint="join private tables on the privacy unit or on the keys that lead to it "
                "(schemas/README.md: privacy_unit via references)",
            )
        check_connected(self.instances, self.edges, self.flat_links)
        unit_class = classes.pop()
        root_unit = next(iter(units.values()))
        return self._relation(unit_class, root_unit)

    def _inst(self, alias: str) -> Instance:
        return next(i for i in self.instances if i.alias == alias)

    def _relation(
        self, unit_class: tuple[str, str], root_unit: tuple[str, str]
    ) -> tuple[Table, JoinSource, dict[str, exp.Expression], set[str]]:
        visible = [i for i in self.instances if not i.hidden]
        vnames, names, ambiguous, columns = virtual_columns(visible)
        unit_columns = [v for key, v in vnames.items() if self.uf.find(key) == unit_class]
        select = exp.select()
        for (alias, name), vname in vnames.items():
            inst = self._inst(alias)
            source = inst.element if inst.unnest is not None else column_of(inst, name).name
            select = select.select(
                exp.alias_(exp.column(source, table=alias), vname, copy=False), copy=False
            )
        unit_type = column_of(self._inst(root_unit[0]), root_unit[1]).type
        select = select.select(
            exp.alias_(exp.column(root_unit[1], table=root_unit[0]), UNIT_OF_ROW, copy=False),
            copy=False,
        )
        select = from_where(select, self.instances, self.edges)
        derived, derivation = self._derived_bound()
        described = " ⋈ ".join(
            (i.table.name if i.table is not None else "UNNEST")
            + ("" if i.table is not None and i.alias == i.table.name.lower() else f" {i.alias}")
            for i in visible
        )
        hidden = tuple(i.table.name for i in self.instances if i.hidden and i.table is not None)
        if hidden:
            described += " (⋈ " + ", ".join(hidden) + " for the unit)"
        columns.append(Column(UNIT_OF_ROW, unit_type))
        table = Table(
            name=described,
            private=True,
            columns=tuple(columns),
            privacy_unit=UNIT_OF_ROW,
            bound=ContributionBound(max_rows=derived)
            if derived is not None
            else ContributionBound(),
            unit_columns=tuple(unit_columns),
            unit_is_unique=unit_unique(self.instances, self.outer, self.uf, unit_class),
        )
        origins = tuple(
            (vname, inst.table.name, name)
            for (alias, name), vname in vnames.items()
            if (inst := self._inst(alias)).table is not None
        )
        joined = JoinSource(select, described, derived, derivation, hidden, origins=origins)
        return table, joined, names, ambiguous

    def _derived_bound(self, subset: list[Instance] | None = None) -> tuple[int | None, str]:
        """:func:`~dpproxy.sql.joinparts.derived_bound` of the instances (or ``subset``)."""
        members = self.instances if subset is None else subset
        return derived_bound(members, self.edges, self.flat_links, self.catalog)
