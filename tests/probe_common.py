"""What the MariaDB probes (tests/inbox_key_probe.py, tests/redo_probe.py)
share: the throwaway server of tests/db.sh (OBX_MY_PORT; root over TCP, no
password) and its run dir (OBX_TEST_RUNDIR: mariadbd's pid)."""
import os, subprocess

PORT = os.environ["OBX_MY_PORT"]
RUNDIR = os.environ["OBX_TEST_RUNDIR"]


def client(db="obx"):
    """A client's command line: batch mode, no column names."""
    return ["mariadb", "--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-P", PORT, "-u", "root", "-N", "-B", db]


def my(sql, check=True, db="obx"):
    """Runs sql in a session of its own; its output (exits on an error unless not check)."""
    r = subprocess.run(client(db), input=sql, capture_output=True, text=True)
    if r.returncode and check:
        raise SystemExit("mariadb: " + r.stderr[:3000])
    return r.stdout


def srv_cpu():
    """mariadbd's CPU time so far (user + system), seconds."""
    with open(os.path.join(RUNDIR, "my.pid")) as f:
        pid = int(f.read())
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
