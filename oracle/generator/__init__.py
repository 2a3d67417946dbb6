"""The program generator's parts, mirroring ``semantics/ops`` (D384): ``config`` (options,
results, op counts), ``engine`` (the value pool and ``_Gen``), ``base`` (the builder registry),
one builder module per op family (``math``, ``tensor``, ``shape``, ``nn``, ``sharding``,
``tile_select``, ``tile_scan``, ``tile_sort``, ``tile_mma``, ``tile_reduce``), ``structure``
(loops, calls, dispatch) and ``limits`` (capability restriction). The public API, which also
imports every builder module (registering them), is ``tilefoundry.oracle.programs``."""
