"""Delta validation: each table's expectation suite, checked with Great Expectations on every
delta batch before any sketch is maintained with it (see :mod:`sketch_core.validation.gate`)."""
