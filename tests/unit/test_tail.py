"""ccrig/tail.py: a growing file read in whole records, however the writer's writes fall."""
import os

from ccrig.tail import Tail


def test_a_record_still_being_written_comes_whole_with_the_next_read(tmp_path):
    path = tmp_path / "lines"
    with open(path, "wb", buffering=0) as w:
        t = Tail(os.open(path, os.O_RDONLY))
        assert t.read() == b""
        w.write(b'{"t": 1}\n{"t": ')
        assert t.read() == b'{"t": 1}\n'
        assert t.read() == b""   # the half line waits
        w.write(b'2}\n')
        assert t.read() == b'{"t": 2}\n'
        os.close(t.fd)


def test_fixed_size_records_are_cut_at_their_size(tmp_path):
    path = tmp_path / "events"
    with open(path, "wb", buffering=0) as w:
        t = Tail(os.open(path, os.O_RDONLY), 4)
        w.write(b"aaaabb")
        assert t.read() == b"aaaa"
        w.write(b"bbcccc")
        assert t.read() == b"bbbbcccc" and t.pos == 12
        os.close(t.fd)
