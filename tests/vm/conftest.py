"""The vm tier. tests/vm/test_vm_tier.py boots one guest (a distribution kernel under virtme-ng) and runs
`pytest tests/vm/guest` inside it; the guest tests are collected only there, never by the outer pytest."""
from ccrig.topologies.testbeds.vm import in_guest

collect_ignore = [] if in_guest() else ["guest"]
