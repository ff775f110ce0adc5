"""tc statistics parsed from real captures: pfifo, bfifo and htb on the development kernel (6.18, iproute2
6.1); red, fq, sfq, drr, fq_codel, codel and pie under htb inside the VM (Debian 6.1), each with a UDP flood
through a 10 Mbit/s htb class. Captured with `tc -s -j qdisc show dev D` and `tc -s class show dev D`."""
from ccrig.qdiscs.stats import COLUMNS, is_counter, parse, parse_classes

# --- captures ------------------------------------------------------------------------------------------

HOST_HTB_PFIFO = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":1,"direct_qlen":1000},"bytes":1501383,"packets":1062,"drops":2150,"overlimits":1040,"requeues":0,"backlog":28840,"qlen":20},{"kind":"pfifo","handle":"10:","parent":"1:1","options":{"limit":20},"bytes":1501293,"packets":1061,"drops":2150,"overlimits":0,"requeues":0,"backlog":28840,"qlen":20}]'''

HOST_HTB_BFIFO = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":1,"direct_qlen":1000},"bytes":4035241,"packets":2837,"drops":5754,"overlimits":2798,"requeues":0,"backlog":28840,"qlen":20},{"kind":"bfifo","handle":"10:","parent":"1:1","options":{"limit":30280},"bytes":1503263,"packets":1050,"drops":2153,"overlimits":0,"requeues":0,"backlog":28840,"qlen":20}]'''

HOST_HTB_CLASS = r'''class htb 1:1 root leaf 10: prio 0 rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 4049571 bytes 2846 pkt (dropped 5765, overlimits 2808 requeues 0) 
 backlog 21630b 15p requeues 0
 lended: 2846 borrowed: 0 giants: 0
 tokens: -17825 ctokens: -17825

'''

VM_RED = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":897867,"packets":634,"drops":3449,"overlimits":461,"requeues":0,"backlog":38934,"qlen":27},{"kind":"red","handle":"10:","parent":"1:1","options":{"limit":151400,"min":12616,"max":37850,"ecn":true,"harddrop":false,"adaptive":false,"nodrop":false},"bytes":897867,"packets":634,"drops":3449,"overlimits":3449,"requeues":0,"backlog":38934,"qlen":27,"marked":0,"early":3449,"pdrop":0,"other":0}]'''

VM_FQ = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":1344282,"packets":951,"drops":0,"overlimits":629,"requeues":0,"backlog":0,"qlen":0},{"kind":"fq","handle":"10:","parent":"1:1","options":{"limit":100,"flow_limit":100,"buckets":1024,"orphan_mask":1023,"quantum":3028,"initial_quantum":15140,"low_rate_threshold":68750,"refill_delay":40000,"timer_slack":10000,"horizon":10000000,"horizon_drop":null},"bytes":1344282,"packets":951,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0,"flows":3,"inactive":1,"throttled":0,"gc":0,"highprio":0,"throttled":0}]'''

VM_SFQ = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":1232167,"packets":862,"drops":0,"overlimits":701,"requeues":0,"backlog":67774,"qlen":47},{"kind":"sfq","handle":"10:","parent":"1:1","options":{"limit":100,"quantum":1514,"depth":127,"divisor":1024},"bytes":1232167,"packets":862,"drops":0,"overlimits":0,"requeues":0,"backlog":67774,"qlen":47}]'''

VM_FQ_CODEL = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":1881133,"packets":1313,"drops":105,"overlimits":1049,"requeues":0,"backlog":67774,"qlen":47},{"kind":"fq_codel","handle":"10:","parent":"1:1","options":{"limit":100,"flows":1024,"quantum":1514,"target":4999,"interval":99999,"memory_limit":33554432,"ecn":true,"drop_batch":64},"bytes":1881133,"packets":1313,"drops":105,"overlimits":0,"requeues":0,"backlog":67774,"qlen":47,"maxpacket":1442,"drop_overlimit":0,"new_flow_count":5,"ecn_mark":0,"memory_used":108288,"new_flows_len":0,"old_flows_len":1}]'''

VM_CODEL = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":2260648,"packets":1580,"drops":110,"overlimits":1347,"requeues":0,"backlog":0,"qlen":0},{"kind":"codel","handle":"10:","parent":"1:1","options":{"limit":100,"target":4999,"interval":99999},"bytes":2260648,"packets":1580,"drops":110,"overlimits":0,"requeues":0,"backlog":0,"qlen":0,"count":110,"lastcount":1,"ldelay":13,"drop_next":0,"maxpacket":1442,"ecn_mark":0,"drop_overlimit":0}]'''

VM_PIE = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":1772917,"packets":1237,"drops":66,"overlimits":1064,"requeues":0,"backlog":67774,"qlen":47},{"kind":"pie","handle":"10:","parent":"1:1","options":{"limit":100,"target":15000,"tupdate":16000,"alpha":2,"beta":20},"bytes":1772917,"packets":1237,"drops":66,"overlimits":0,"requeues":0,"backlog":67774,"qlen":47,"prob":0.244965,"delay":66265,"pkts_in":1284,"overlimit":0,"dropped":66,"maxq":46,"ecn_mark":0}]'''

VM_DRR = r'''[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":1770714,"packets":1241,"drops":0,"overlimits":949,"requeues":0,"backlog":0,"qlen":0},{"kind":"pfifo","handle":"8001:","parent":"10:1","options":{"limit":50},"bytes":1770714,"packets":1241,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"drr","handle":"10:","parent":"1:1","options":{},"bytes":1770714,"packets":1241,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"pfifo","handle":"8002:","parent":"10:2","options":{"limit":50},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]'''

VM_DRR_CLASS = r'''class htb 1:1 root leaf 10: prio 0 rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 1770714 bytes 1241 pkt (dropped 0, overlimits 949 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 1241 borrowed: 0 giants: 0
 tokens: 19175 ctokens: 19175

class drr 10:1 root leaf 8001: quantum 1514b 
 Sent 1770714 bytes 1241 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 deficit 0b 
class drr 10:2 root leaf 8002: quantum 1514b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 deficit 0b 
'''

# --- tests -----------------------------------------------------------------------------------------------


def test_common_columns_come_first_and_in_archive_order():
    rows = parse(HOST_HTB_PFIFO)
    assert list(rows[0])[:len(COLUMNS)] == COLUMNS == [
        "kind", "handle", "parent", "sent_packets", "sent_bytes", "dropped", "overlimits", "requeues",
        "backlog_packets", "backlog_bytes"]


def test_htb_with_pfifo_under_a_flood():
    htb, pfifo = parse(HOST_HTB_PFIFO)
    assert htb == {"kind": "htb", "handle": "1:", "parent": "root", "sent_packets": 1062, "sent_bytes": 1501383,
                   "dropped": 2150, "overlimits": 1040, "requeues": 0, "backlog_packets": 20,
                   "backlog_bytes": 28840}
    assert pfifo["kind"] == "pfifo" and pfifo["parent"] == "1:1" and pfifo["handle"] == "10:"
    assert (pfifo["dropped"], pfifo["backlog_packets"], pfifo["backlog_bytes"]) == (2150, 20, 28840)
    # a drop-tail queue that is dropping is full: 20 packets is its limit
    assert set(pfifo) == set(COLUMNS)


def test_bfifo():
    _, bfifo = parse(HOST_HTB_BFIFO)
    assert bfifo["kind"] == "bfifo" and bfifo["dropped"] == 2153 and bfifo["backlog_bytes"] == 28840


def test_red_counts_early_drops_and_marks():
    red = parse(VM_RED)[1]
    assert red["kind"] == "red" and red["dropped"] == 3449
    assert (red["red_early"], red["red_marked"], red["red_pdrop"], red["red_other"]) == (3449, 0, 0, 0)


def test_aqm_counters():
    codel = parse(VM_CODEL)[1]
    assert codel["codel_count"] == 110 and codel["codel_ldelay"] == 13 and codel["codel_drop_overlimit"] == 0
    fqc = parse(VM_FQ_CODEL)[1]
    assert fqc["dropped"] == 105 and fqc["fq_codel_new_flow_count"] == 5 and fqc["fq_codel_ecn_mark"] == 0
    assert fqc["backlog_packets"] == 47 and fqc["fq_codel_memory_used"] == 108288
    pie = parse(VM_PIE)[1]
    # pie has its own `dropped`, kept apart from the common column by the kind prefix
    assert pie["pie_prob"] == 0.244965 and pie["pie_delay"] == 66265 and pie["pie_dropped"] == pie["dropped"] == 66


def test_fq_and_sfq():
    fq = parse(VM_FQ)[1]
    assert fq["kind"] == "fq" and fq["fq_flows"] == 3 and fq["fq_inactive"] == 1 and fq["fq_throttled"] == 0
    sfq = parse(VM_SFQ)[1]
    assert sfq["kind"] == "sfq" and sfq["backlog_packets"] == 47 and set(sfq) == set(COLUMNS)


def test_drr_tree_and_classes():
    rows = parse(VM_DRR)
    assert [(r["kind"], r["handle"], r["parent"]) for r in rows] == [
        ("htb", "1:", "root"), ("pfifo", "8001:", "10:1"), ("drr", "10:", "1:1"), ("pfifo", "8002:", "10:2")]
    classes = parse_classes(VM_DRR_CLASS)
    assert [(c["kind"], c["handle"], c["parent"], c["leaf"]) for c in classes] == [
        ("htb", "1:1", "1:", "10:"), ("drr", "10:1", "10:", "8001:"), ("drr", "10:2", "10:", "8002:")]
    assert classes[1]["sent_packets"] == 1241 and classes[1]["sent_bytes"] == 1770714
    assert classes[2]["sent_packets"] == 0 and classes[1]["drr_deficit"] == 0


def test_htb_class_text_with_backlog_and_negative_tokens():
    (c,) = parse_classes(HOST_HTB_CLASS)
    assert (c["sent_bytes"], c["sent_packets"], c["dropped"], c["overlimits"]) == (4049571, 2846, 5765, 2808)
    assert (c["backlog_bytes"], c["backlog_packets"]) == (21630, 15)
    assert c["htb_tokens"] == -17825 and c["htb_lended"] == 2846


def test_class_json_from_newer_iproute2():
    text = ('[{"class":"drr","handle":"10:1","parent":"10:","leaf":"8001:","bytes":300,"packets":2,"drops":1,'
            '"overlimits":0,"requeues":0,"backlog":0,"qlen":0,"deficit":1514}]')
    (c,) = parse_classes(text)
    assert c["kind"] == "drr" and c["sent_packets"] == 2 and c["dropped"] == 1 and c["drr_deficit"] == 1514


def test_backlog_sizes_in_kilobytes():
    text = ("class drr 10:1 root leaf 8001: quantum 1514b \n Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)"
            " \n backlog 2Kb 2p requeues 0\n deficit 1Kb \n")
    (c,) = parse_classes(text)
    assert c["backlog_bytes"] == 2048 and c["drr_deficit"] == 1024


def test_empty_output_and_counter_kinds():
    assert parse("") == [] and parse("[]") == [] and parse_classes("") == []
    assert is_counter("red_early") and is_counter("dropped") and is_counter("pie_dropped")
    assert not is_counter("backlog_bytes") and not is_counter("pie_prob") and not is_counter("kind")


def test_not_json_is_a_run_error():
    import pytest
    from ccrig.errors import RunError
    with pytest.raises(RunError, match="not JSON"):
        parse("qdisc pfifo 10: parent 1:1 limit 20p")


def test_every_discipline_reaches_the_archive_csv(tmp_path):
    """The runner's qdisc.csv (experiments/run/archive.py) grows a column for each discipline's own counter."""
    import csv
    from ccrig.experiments.run.archive import QDISC_COLUMNS, CsvTable
    table = CsvTable(tmp_path / "qdisc.csv", QDISC_COLUMNS)
    captures = [HOST_HTB_PFIFO, HOST_HTB_BFIFO, VM_RED, VM_FQ, VM_SFQ, VM_DRR, VM_FQ_CODEL, VM_CODEL, VM_PIE]
    for t, text in enumerate(captures):
        for row in parse(text):
            table.add_columns(row)
            table.write({"t": t, "node": "r1", "dev": "eth0", **row})
    table.close()
    rows = list(csv.DictReader((tmp_path / "qdisc.csv").open()))
    assert len(rows) == sum(len(parse(c)) for c in captures)
    header = set(rows[0])
    assert {"red_early", "red_marked", "red_pdrop", "fq_flows", "fq_codel_ecn_mark", "codel_ldelay",
            "pie_prob", "pie_dropped"} <= header
    red = next(r for r in rows if r["kind"] == "red")
    assert red["red_early"] == "3449" and red["dropped"] == "3449"
