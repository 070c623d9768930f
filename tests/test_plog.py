"""CANN plog error lines (dapo_ops/core/plog.py): what a multi-host run's evidence takes from an NPU host's
``~/ascend/log`` (issue 29 item 5). The samples are lines of public reports, each with its source; only the
file names / IPs are changed (documentation addresses)."""

from __future__ import annotations

from dapo_ops.core import plog

# vllm-project/vllm-ascend#4725: HCCL init on a port another process holds (plog and stdout, proc name empty)
LISTEN = """\
[INFO] HCCL(60570,):2025-12-04-14:46:07.900.100 [hccl_comm.cc:80] [60570][HcclComm][Init] rankSize[16], userRank[9]
[ERROR] HCCL(60570,):2025-12-04-14:46:07.911.312 [hccl_socket.cc:106] [60570][HcclSocket][Listen] socket type[0], listen on ip[192.0.2.195] and specific port[16666] fail. Please check the port status and whether the port is being used by other process.
[ERROR] HCCL(60570,):2025-12-04-14:46:07.911.316 [hccl_socket_manager.cc:54] [60570][ServerInit]call trace: hcclRet -> 7
[ERROR] HCCL(60570,):2025-12-04-14:46:07.911.325 [hccl_comm.cc:115] [60570][HcclComm][Init]errNo[0x0000000005000007] hccl initialize failed
[WARNING] HCCL(60570,):2025-12-04-14:46:07.911.400 [adapter.cc:20] [60570] retry later
"""
# gpustack/gpustack#3352: ASCEND_RT_VISIBLE_DEVICES naming a device the container lacks (RUNTIME / ASCENDCL)
VISIBLE = """\
[ERROR] RUNTIME(42,python):2025-11-18-09:33:13.673.818 [api_error.cc:2350]58 SetDevice:Set visible device failed, invalid device=0, input visible devices:4
[ERROR] ASCENDCL(42,python):2025-11-18-09:33:13.673.913 [device.cpp:54]58 aclrtSetDeviceImpl: open device 0 failed, runtime result = 107001.
"""
# vllm-project/vllm-ascend#3413: torch_npu's PTA line (own RankID) and the EI0002 notify wait naming the remote rank
NOTIFY = """\
(WorkerDict pid=2969, ip=192.0.2.90) [ERROR] 2025-10-11-15:09:34 (PID:2969, Device:0, RankID:101) ERR00100 PTA call acl api failed.
[ERROR] HCCL(2969,python):2025-10-11-15:09:34.713.335 [task_exception_handler.cc:1012] [2969][TaskExceptionHandler] the wait execution of the Notify register times out, remote rank:[24], rankId[25]
"""


def test_error_lines_keep_the_errors_oldest_first_with_time_module_and_source():
    got = plog.error_lines(LISTEN)
    assert [e["where"] for e in got] == ["hccl_socket.cc:106", "hccl_socket_manager.cc:54", "hccl_comm.cc:115"]
    first = got[0]
    assert (first["module"], first["pid"], first["proc"], first["time"]) == (
        "HCCL",
        60570,
        "",
        "2025-12-04-14:46:07.911.312",
    )
    assert "listen on ip[192.0.2.195] and specific port[16666] fail" in first["msg"]
    assert first["line"].startswith("[ERROR] HCCL(60570,):") and first["ts"] < got[1]["ts"] < got[2]["ts"]
    assert all(e["level"] == "ERROR" for e in got)  # INFO / WARNING lines are routine


def test_runtime_and_acl_lines_parse_and_name_no_rank():
    got = plog.error_lines(VISIBLE)
    assert [e["module"] for e in got] == ["RUNTIME", "ASCENDCL"]
    assert got[0]["where"] == "api_error.cc:2350" and got[0]["msg"].startswith("58 SetDevice:Set visible device failed")
    assert [e["rank"] for e in got] == [None, None]


def test_own_rank_is_read_and_the_remote_rank_it_waited_for_is_not_taken_for_it():
    pta, notify = plog.error_lines(NOTIFY)
    assert (pta["module"], pta["rank"], pta["pid"]) == ("PTA", 101, 2969)  # Ray's prefix in front is tolerated
    assert (notify["rank"], notify["remote_rank"]) == (25, 24)
    assert plog.rank_of("Reason: not received the Notify record from remote rank: [24].") is None
    assert plog.rank_of("[rank6]:[E1101 02:00:00.1 ProcessGroupHCCL.cpp:543] [Rank 6] Watchdog caught") == 6
    assert plog.rank_of("[HcclComm][Init] rankSize[16], userRank[9]") == 9


def test_a_storm_of_one_line_keeps_its_start_and_end_and_counts_the_rest():
    line = "[ERROR] HCCL(7,python):2025-01-01-00:00:%02d.000.000 [a.cc:1] [7] notify wait timeout\n"
    got = plog.error_lines("".join(line % (i % 60) for i in range(60)) + "not a plog line\n", limit=20)
    assert len(got) == 20 and got[-1]["skipped"] == 40
    assert plog.parse_line("(pid=1) hello") is None and plog.parse_line("") is None


def _worker_log(d, name, text, mtime):
    import os

    p = d / name
    p.write_text(text)
    os.utime(p, (mtime, mtime))


def test_two_hosts_evidence_names_the_host_and_rank_of_the_earliest_root_cause(tmp_path):
    """h2's HCCL init failed (plog, rank 9) before h1's ranks timed out waiting in a collective: the verdict names
    h2 rank 9, not the head whose timeout came later and is only a symptom (the root-cause rule of
    core/classify/decide.py, across hosts)."""
    import json

    from dapo_ops.agent import evidence as agent_ev
    from dapo_ops.core import first_error

    hosts = {}
    for h in ("h1", "h2"):
        (tmp_path / h / "logs").mkdir(parents=True)
        (tmp_path / h / "plog").mkdir()
    # h1 (head): a collective timeout in its worker log, written after h2's error
    _worker_log(
        tmp_path / "h1" / "logs",
        "worker-aa-01000000-4001.err",
        "[rank0]:[E1204 14:46:40.1 ProcessGroupHCCL.cpp:543] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkHCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800011 milliseconds "
        "before timing out.\n",
        1764859600.0,
    )
    _worker_log(
        tmp_path / "h1" / "logs", "worker-old.err", "Traceback (most recent call last):\nValueError: old\n", 1000.0
    )  # before the attempt: not read
    (tmp_path / "h2" / "plog" / "plog-60570_20251204144600.log").write_text(LISTEN)
    for h in ("h1", "h2"):
        hosts[h] = agent_ev.collect(
            str(tmp_path / h / "logs"), since=1764859000.0, plog_dirs=[str(tmp_path / h / "plog")]
        )
    assert [lg["name"] for lg in hosts["h1"]["ray_logs"]] == ["worker-aa-01000000-4001.err"]
    assert len(hosts["h2"]["plog"]) == 3 and hosts["h2"]["plog"][0]["file"] == "plog-60570_20251204144600.log"
    err = first_error.earliest(hosts)
    # both are collective trouble (the classifier's hccl-timeout class): the earlier one, on h2, is named
    assert (err["host"], err["cls"], err["tier"]) == ("h2", "hccl-timeout", first_error.COLLECTIVE), err
    line = first_error.summary_line(err, [])
    # the error lines name no rank; the same pid's HCCL init line did (userRank[9])
    assert (err["rank"], hosts["h2"]["plog"][0]["rank_from"]) == (9, "pid"), err
    assert line.startswith("earliest error: host h2 rank 9 at 2025-12-04-14:46:07.911.312 (plog-60570"), line
    # the EI0002 notify wait (collective) beats the bare PTA line; its own rank is named, not the waited-for one
    (tmp_path / "h2" / "plog" / "plog-60570_20251204144600.log").write_text(NOTIFY)
    hosts["h2"] = agent_ev.collect(str(tmp_path / "h2" / "logs"), since=0.0, plog_dirs=[str(tmp_path / "h2" / "plog")])
    err = first_error.earliest(hosts)
    assert (err["host"], err["rank"], err["cls"]) == ("h2", 25, "hccl-timeout"), err  # its own rank, not remote 24
    # a specific root cause beats a collective symptom even when the symptom came first (decide.py's rule)
    (tmp_path / "h2" / "plog" / "plog-60570_20251204144600.log").write_text(VISIBLE.replace("2025-11-18", "2025-12-05"))
    hosts["h2"] = agent_ev.collect(str(tmp_path / "h2" / "logs"), since=0.0, plog_dirs=[str(tmp_path / "h2" / "plog")])
    err = first_error.earliest(hosts)
    assert (err["host"], err["tier"], err["cls"]) == ("h2", first_error.ROOT, "config-error"), err
    # a lost host is named, and nothing of it is made up
    assert "no evidence from h3 (lost" in first_error.summary_line(err, ["h3"])
    # the files land in the run dir, one directory per host
    for h, found in hosts.items():
        d = agent_ev.write(str(tmp_path / "run"), h, found)
        assert json.loads((tmp_path / "run" / "evidence" / h / "evidence.json").read_text())["plog"] == found["plog"]
    assert "Watchdog caught collective" in (tmp_path / "run" / "evidence" / "h1" / "ray-worker-logs.txt").read_text()
    assert "Set visible device failed" in (tmp_path / "run" / "evidence" / "h2" / "plog-errors.txt").read_text()
    assert d.endswith("/evidence/h2")


def test_no_error_anywhere_is_said_as_such():
    from dapo_ops.core import first_error

    assert (
        first_error.earliest({"h1": {"ray_logs": [{"name": "w.out", "mtime": 1.0, "text": "step:1 - a:1\n"}]}}) is None
    )
    assert first_error.summary_line(None, []) == "no error found in any host's Ray worker logs or plogs"
