"""The core every other layer builds on: the operations a store executes (``_ops``) and THE
store base every adapter extends (``_store``). Models, errors, limits, records and the port
join this package when the flat low-level modules move in."""
