"""`porter bench` (porter's module against peer runtimes, side by side), served-request timing and
load tests, and `porter build --tune`."""
