"""SQLAlchemy Core mirror of the tables created by ``sql/`` (tests check the two agree)."""

from __future__ import annotations

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData(schema="sketch")

tables = Table(
    "tables",
    metadata,
    Column("table_id", BigInteger, primary_key=True),
    Column("name", Text, nullable=False),  # unique among the tables not dropped
    Column("sort_by", ARRAY(Text), nullable=False),
    Column("created_seq", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("dropped_seq", BigInteger),
)
# The registrations a name can refer to: at most one per name (sql/0011_table_drop.sql).
LIVE_TABLES = tables.c.dropped_seq.is_(None)

table_commits = Table(
    "table_commits",
    metadata,
    Column("seq", BigInteger, primary_key=True),
    Column("table_id", BigInteger, ForeignKey("sketch.tables.table_id"), nullable=False),
    Column("snapshot_id", BigInteger),
    Column("parent_snapshot_id", BigInteger),
    Column("operation", Text, nullable=False),
    Column("added_rows", BigInteger, nullable=False),
    Column("deleted_rows", BigInteger, nullable=False),
    Column("added_files", Integer, nullable=False),
    Column("removed_files", Integer, nullable=False),
    Column("total_rows", BigInteger, nullable=False),
    Column("committed_at", DateTime(timezone=True), nullable=False),
    Column("files", JSONB(none_as_null=True)),
)

# Every pointer change of the Iceberg catalog, numbered by its trigger (sql/0014).
catalog_commits = Table(
    "catalog_commits",
    metadata,
    Column("seq", BigInteger, primary_key=True),
    Column("catalog_name", Text, nullable=False),
    Column("table_namespace", Text, nullable=False),
    Column("table_name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("metadata_location", Text),
    Column("previous_metadata_location", Text),
    Column("previous_namespace", Text),
    Column("previous_name", Text),
    Column("committed_at", DateTime(timezone=True), nullable=False),
    Column("recorded", Boolean, nullable=False),
)

partitions = Table(
    "partitions",
    metadata,
    Column("partition_id", BigInteger, primary_key=True),
    Column("table_id", BigInteger, ForeignKey("sketch.tables.table_id"), nullable=False),
    Column("attribute", Text, nullable=False),
    Column("fragment_count", Integer, nullable=False),
    Column("boundaries", JSONB, nullable=False),
    Column("computed_at_seq", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

sketches = Table(
    "sketches",
    metadata,
    Column("sketch_id", BigInteger, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("query_sql", Text, nullable=False),
    Column("params", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("template_key", Text),
    Column("partition_ids", JSONB, nullable=False),
)

# A sketch whose recursive view is also written to an Iceberg table (sql/0015).
materialized_views = Table(
    "materialized_views",
    metadata,
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), primary_key=True),
    Column("table_name", Text, nullable=False, unique=True),
)

template_stats = Table(
    "template_stats",
    metadata,
    Column("template_key", Text, primary_key=True),
    Column("query_sql", Text, nullable=False),
    Column("misses", Integer, nullable=False),
    Column("hits", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

sketch_versions = Table(
    "sketch_versions",
    metadata,
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("table_snapshots", JSONB, nullable=False),
    Column("state_ref", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

sketch_fragments = Table(
    "sketch_fragments",
    metadata,
    Column("sketch_id", BigInteger, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("partition_id", BigInteger, ForeignKey("sketch.partitions.partition_id"), primary_key=True),
    Column("bitmap", LargeBinary, nullable=False),
)

maintenance_runs = Table(
    "maintenance_runs",
    metadata,
    Column("run_id", BigInteger, primary_key=True),
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), nullable=False),
    Column("from_version", Integer),
    Column("to_version", Integer),
    Column("strategy", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("delta_rows", BigInteger, nullable=False),
    Column("seconds", Float),
    Column("error", Text),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("table_rows", BigInteger),
    Column("built_state", Boolean, nullable=False),
)

sketch_policies = Table(
    "sketch_policies",
    metadata,
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), primary_key=True),
    Column("policy", JSONB, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

policy_decisions = Table(
    "policy_decisions",
    metadata,
    Column("decision_id", BigInteger, primary_key=True),
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), nullable=False),
    Column("fired", Boolean, nullable=False),
    Column("reason", Text, nullable=False),
    Column("policy", JSONB, nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=False),
)

report_announcements = Table(
    "report_announcements",
    metadata,
    Column("announcement_id", BigInteger, primary_key=True),
    Column("report", Text, nullable=False),
    Column("due_at", DateTime(timezone=True), nullable=False),
    Column("announced_at", DateTime(timezone=True), nullable=False),
    Column("ends_at", DateTime(timezone=True), nullable=False),
)

query_runs = Table(
    "query_runs",
    metadata,
    Column("run_id", BigInteger, primary_key=True),
    Column("template_key", Text, nullable=False),
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id")),
    Column("sketch_version", Integer),
    Column("table_rows", BigInteger, nullable=False),
    Column("files_read", Integer, nullable=False),
    Column("files_total", Integer, nullable=False),
    # The query's own: the call's, less the maintenance or capture done on its way.
    Column("seconds", Float, nullable=False),
    Column("ran_at", DateTime(timezone=True), nullable=False),
)

cost_decisions = Table(
    "cost_decisions",
    metadata,
    Column("decision_id", BigInteger, primary_key=True),
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), nullable=False),
    Column("context", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("estimates", JSONB, nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=False),
)

state_modes = Table(
    "state_modes",
    metadata,
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), primary_key=True),
    Column("mode", Text, nullable=False),
    Column("keep_top", Integer),
    Column("full_bytes", BigInteger, nullable=False),
    Column("top_m_bytes", BigInteger),
    Column("reason", Text, nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=False),
)

samples = Table(
    "samples",
    metadata,
    Column("sample_id", BigInteger, primary_key=True),
    Column("table_id", BigInteger, ForeignKey("sketch.tables.table_id"), nullable=False),
    Column("group_columns", ARRAY(Text), nullable=False),
    Column("rate", Float, nullable=False),
    Column("drawn_at_seq", BigInteger, nullable=False),
    Column("table_rows", BigInteger, nullable=False),
    Column("sample_rows", BigInteger, nullable=False),
    Column("strata", BigInteger, nullable=False),
    Column("path", Text, nullable=False),
    Column("drawn_at", DateTime(timezone=True), nullable=False),
)

attribute_choices = Table(
    "attribute_choices",
    metadata,
    Column("sketch_id", BigInteger, ForeignKey("sketch.sketches.sketch_id"), primary_key=True),
    Column("strategy", Text, nullable=False),
    Column("estimates", JSONB, nullable=False),
    Column("outcome", JSONB),
    Column("decided_at", DateTime(timezone=True), nullable=False),
)

table_suites = Table(
    "table_suites",
    metadata,
    Column("table_id", BigInteger, ForeignKey("sketch.tables.table_id"), primary_key=True),
    Column("suite", JSONB, nullable=False),
    Column("learned_seq", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

delta_validations = Table(
    "delta_validations",
    metadata,
    Column("table_id", BigInteger, ForeignKey("sketch.tables.table_id"), primary_key=True),
    Column("seq", BigInteger, ForeignKey("sketch.table_commits.seq"), primary_key=True),
    Column("status", Text, nullable=False),
    Column("failures", JSONB, nullable=False),
    Column("inserted_rows", BigInteger, nullable=False),
    Column("deleted_rows", BigInteger, nullable=False),
    Column("checked_at", DateTime(timezone=True), nullable=False),
    Column("resolved_at", DateTime(timezone=True)),
    Column("resolution", Text),
    Column("fixed_at_seq", BigInteger),
)
