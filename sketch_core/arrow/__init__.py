"""Small Arrow helpers: IPC files (:mod:`.files`), filters and projections as Acero plans
(:mod:`.plans`), and the memory pool the process allocates from (:mod:`.pool`)."""
