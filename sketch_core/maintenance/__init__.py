"""Maintenance's machinery below the service: the driver that runs the incremental engine over
pinned snapshots and table deltas (:mod:`.driver`), the operator state on disk
(:mod:`.state_store`), the state budget that decides which sketches keep state (:mod:`.budget`),
and the cost advisor that fits and asks the cost models (:mod:`.advisor`)."""
