"""Tests of the Python client (static/clients/gpuportal.py) against a real
portal: integration/python_client_test.go starts `gpuportal serve --dev`,
downloads the client from the portal, and runs this file with python3:

    GPUPORTAL_URL=http://127.0.0.1:PORT GPUPORTAL_TOKEN=<alice's token> \
        python3 test_client.py

The gpuportal module is the one on PYTHONPATH (the portal's copy). The
demo accounts of serve --dev are used: alice and bob, password "dev".
"""

import os
import sys
import time
import unittest

import gpuportal

URL = os.environ["GPUPORTAL_URL"]
COUNTING = ["sh", "-c", "for i in 1 2 3; do echo step $i; sleep 1; done; printf 'caf\\303\\251\\n'"]


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gp = gpuportal.Client()  # GPUPORTAL_URL, GPUPORTAL_TOKEN

    def test_token_from_the_environment(self):
        me = self.gp.me()
        self.assertEqual(me["name"], "alice")

    def test_no_token(self):
        saved = os.environ.pop("GPUPORTAL_TOKEN")
        try:
            with self.assertRaises(gpuportal.ConfigError) as cm:
                gpuportal.Client()
            self.assertIn("GPUPORTAL_TOKEN", str(cm.exception))
        finally:
            os.environ["GPUPORTAL_TOKEN"] = saved

    def test_login_and_logout(self):
        bob = gpuportal.Client.login(URL, "bob", "dev")
        self.assertEqual(bob.me()["name"], "bob")
        bob.logout()
        with self.assertRaises(gpuportal.Unauthorized) as cm:
            bob.me()
        self.assertEqual(cm.exception.status, 401)
        with self.assertRaises(gpuportal.Unauthorized) as cm:
            gpuportal.Client.login(URL, "bob", "wrong")
        self.assertTrue(cm.exception.message)

    def test_bad_token(self):
        with self.assertRaises(gpuportal.Unauthorized):
            gpuportal.Client(URL, "not-a-token").me()

    def test_submit_stream_wait_list(self):
        job = self.gp.submit(name="py-counting", command=COUNTING, gpus=1)
        self.assertEqual(job["name"], "py-counting")
        self.assertIn(job["state"], ("queued", "running"))
        text = "".join(self.gp.stream_logs(job["id"], poll=0.2, timeout=120))
        self.assertEqual([l for l in text.splitlines() if l.startswith("step")], ["step 1", "step 2", "step 3"])
        self.assertIn("caf\u00e9", text)  # UTF-8 across reads
        done = self.gp.wait(job["id"], timeout=60, poll=0.2, check=True)
        self.assertEqual(done["state"], "succeeded")
        self.assertEqual(done["exit_code"], 0)
        self.assertIn("step 3", self.gp.logs(job["id"]))
        self.assertEqual(self.gp.logs(job["id"], tail_bytes=6), "caf\u00e9\n")  # 6 bytes
        mine = self.gp.jobs(scope="mine")
        self.assertIn(job["id"], [j["id"] for j in mine])
        self.assertEqual({j["user"] for j in mine}, {"alice"})
        succeeded = self.gp.jobs(state=["succeeded"], q="py-counting")
        self.assertIn(job["id"], [j["id"] for j in succeeded])
        self.assertTrue(all(j["state"] == "succeeded" for j in succeeded))
        self.assertEqual(len(self.gp.jobs(limit=1)), 1)

    def test_cancel(self):
        job = self.gp.submit({"name": "py-sleeper", "command": "sleep 600"}, gpus=1)
        cancelled = self.gp.cancel(job["id"])
        self.assertEqual(cancelled["id"], job["id"])
        with self.assertRaises(gpuportal.JobFailed) as cm:
            self.gp.wait(job["id"], timeout=60, poll=0.2, check=True)
        self.assertEqual(cm.exception.job["state"], "cancelled")
        self.assertIn("cancelled", str(cm.exception))
        with self.assertRaises(gpuportal.Conflict) as cm:
            self.gp.cancel(job["id"])
        self.assertTrue(cm.exception.message)
        # A finished job's stream ends with what it had.
        self.assertIsInstance("".join(self.gp.stream_logs(job["id"], timeout=10)), str)

    def test_invalid_names_the_field(self):
        with self.assertRaises(gpuportal.Invalid) as cm:
            self.gp.submit(name="bad", command="true", gpus=0)
        e = cm.exception
        self.assertEqual((e.status, e.field), (400, "gpus"), e.message)
        self.assertIn("gpus", str(e))
        with self.assertRaises(gpuportal.Invalid) as cm:
            self.gp.submit(name="bad", command="true", gpu=1)
        self.assertEqual(cm.exception.field, "gpu", cm.exception.message)
        with self.assertRaises(gpuportal.Invalid) as cm:
            self.gp.submit(command="true", gpus=1)
        self.assertEqual(cm.exception.field, "name", cm.exception.message)

    def test_other_peoples_jobs(self):
        job = self.gp.submit(name="py-private", command="true", gpus=1)
        bob = gpuportal.Client.login(URL, "bob", "dev")
        try:
            with self.assertRaises(gpuportal.NotFound):
                bob.job(job["id"])
            with self.assertRaises(gpuportal.NotFound):
                list(bob.stream_logs(job["id"], follow=False))
            with self.assertRaises(gpuportal.NotFound):
                bob.cancel(job["id"])
        finally:
            bob.logout()
        with self.assertRaises(gpuportal.NotFound) as cm:
            self.gp.job(987654321)
        self.assertEqual(cm.exception.status, 404)

    def test_wait_timeout(self):
        job = self.gp.submit(name="py-long", command="sleep 600", gpus=1)
        try:
            start = time.monotonic()
            with self.assertRaises(gpuportal.WaitTimeout) as cm:
                self.gp.wait(job["id"], timeout=1, poll=0.2)
            self.assertLess(time.monotonic() - start, 30)
            self.assertEqual(cm.exception.job["id"], job["id"])
        finally:
            self.gp.cancel(job["id"])

    def test_unreachable(self):
        with self.assertRaises(gpuportal.ConnectionFailed):
            gpuportal.Client("http://127.0.0.1:9", "x", timeout=5).me()
        with self.assertRaises(gpuportal.ConfigError):
            gpuportal.Client("gpus.example.org", "x")


if __name__ == "__main__":
    print("gpuportal client from", gpuportal.__file__, file=sys.stderr)
    unittest.main(verbosity=2)
