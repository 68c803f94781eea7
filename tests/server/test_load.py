"""The server under load, with real clients (urllib, one connection per request): 64 concurrent clients and a
few thousand requests whose every answer must equal the request's answer when sent alone; the 429 path of a
small --max-concurrent-requests; and SIGTERM while requests are in flight (they finish, the exit status is 0)."""

import random
import signal
import threading
import time
import unittest
import urllib.error

from server_harness import CLASSIFY, SAME_RUN, SANITIZED, Server, close, metric, post, request

CLIENTS = 64
REQUESTS_PER_CLIENT = 15 if SANITIZED else 50  # 3200 requests in all (960 under the sanitizers, 10x slower)

WORDS = ("the movie was great terrible fine boring long short film actor story music plot ending weather city "
         "Paris Berlin café naïve über 東京 emoji 🙂 and but not very quite").split()


def sentence(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def request_bodies(seed=7):
    """Short texts, pairs, small batches and raw scores: the mix a classifier endpoint sees."""
    rng = random.Random(seed)
    bodies = []
    for n in range(24):
        kind = n % 4
        if kind == 0:
            bodies.append({"inputs": sentence(rng, rng.randint(3, 20))})
        elif kind == 1:
            bodies.append({"inputs": [sentence(rng, rng.randint(3, 12)), sentence(rng, rng.randint(3, 12))]})
        elif kind == 2:
            bodies.append({"inputs": [[sentence(rng, rng.randint(2, 30))] for _ in range(rng.randint(2, 4))]})
        else:
            bodies.append({"inputs": sentence(rng, rng.randint(3, 20)), "raw_scores": True})
    return bodies


def run_clients(server, bodies, expected, clients, per_client, outcomes):
    """`clients` threads each sending `per_client` requests; outcomes gets (status, ok, deviation) per answer."""
    def client(n):
        for i in range(per_client):
            k = (n * 7 + i) % len(bodies)
            try:
                status, got = post(server, "/predict", bodies[k])
            except (urllib.error.URLError, ConnectionError) as error:
                outcomes.append(("error", str(error), time.monotonic()))
                return  # the server is gone (the shutdown test): this client is done
            if status == 200:
                outcomes.append((status, close(got, expected[k], SAME_RUN), deviation(got, expected[k])))
            else:
                outcomes.append((status, got, time.monotonic()))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    return threads


def deviation(a, b):
    """The largest relative difference (as close() measures it) between the numbers of two answers."""
    if isinstance(a, list):
        return max((deviation(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(a, dict):
        return max(deviation(a[k], b[k]) for k in a)
    return abs(a - b) / max(1.0, abs(a), abs(b)) if isinstance(a, float) else 0.0


class Load(unittest.TestCase):
    def test_64_clients_get_the_single_request_answers(self):
        self.check_clients_get_the_single_request_answers(CLIENTS, REQUESTS_PER_CLIENT)

    def test_forwards_on_the_requests_threads_give_the_same_answers(self):
        """--forward-thread request (the GPU's default): a request that finds the model idle runs its batch on its
        own thread, the others wait for the worker; 32 clients, fewer rounds."""
        self.check_clients_get_the_single_request_answers(32, 10 if SANITIZED else 20, "--forward-thread", "request")

    def check_clients_get_the_single_request_answers(self, clients, per_client, *server_args):
        bodies = request_bodies()
        with Server(CLASSIFY, *server_args) as server:
            expected = []
            for body in bodies:
                status, answer = post(server, "/predict", body)
                self.assertEqual(status, 200, answer)
                expected.append(answer)
            outcomes = []
            start = time.monotonic()
            for t in run_clients(server, bodies, expected, clients, per_client, outcomes):
                t.join()
            seconds = time.monotonic() - start
            self.assertEqual(len(outcomes), clients * per_client)
            wrong = [o for o in outcomes if o[0] != 200 or not o[1]]
            self.assertEqual(wrong[:5], [], f"{len(wrong)} answers differ from the single-request answers")
            worst = max(o[2] for o in outcomes)
            _, metrics = request(server, "/metrics")
            batches = metric(metrics, "flashdeberta_batch_requests_count")
            alone = metric(metrics, "flashdeberta_batch_requests_bucket", 'le="1"')
            answered = metric(metrics, "flashdeberta_requests_total", 'route="/predict",status="200"')
            print(f"\n{len(outcomes)} requests from {clients} clients in {seconds:.1f} s "
                  f"({len(outcomes) / seconds:.0f} requests/s); {batches:.0f} forwards, {batches - alone:.0f} of them "
                  f"batching several requests; largest score difference from the single-request answer {worst:.2g}")
            self.assertEqual(answered, len(outcomes) + len(bodies))
            self.assertGreater(batches - alone, 0, "no forward batched two requests")
            self.assertEqual(server.stop(), 0, server.stderr())

    def test_beyond_max_concurrent_requests_is_429(self):
        # Requests that take a while (4 texts of 512 tokens), so that 16 clients overlap.
        rng = random.Random(3)
        bodies = [{"inputs": [[sentence(rng, 400)] for _ in range(4)], "truncate": True} for _ in range(4)]
        with Server(CLASSIFY, "--max-concurrent-requests", 2) as server:
            expected = [post(server, "/predict", body)[1] for body in bodies]
            outcomes = []
            for t in run_clients(server, bodies, expected, 16, 15, outcomes):
                t.join()
            statuses = {o[0] for o in outcomes}
            self.assertLessEqual(statuses, {200, 429}, [o for o in outcomes if o[0] not in (200, 429)][:3])
            refused = [o for o in outcomes if o[0] == 429]
            self.assertTrue(refused, "16 clients never found 2 requests in flight")
            for _, error, _ in refused:
                self.assertEqual(error["error_type"], "Overloaded")
                self.assertIn("--max-concurrent-requests", error["error"])
            self.assertTrue(all(o[1] for o in outcomes if o[0] == 200))
            _, metrics = request(server, "/metrics")
            self.assertEqual(metric(metrics, "flashdeberta_requests_total", 'route="/predict",status="429"'),
                             len(refused))
            print(f"\n{len(outcomes)} requests, {len(refused)} answered 429")
            self.assertEqual(server.stop(), 0, server.stderr())

    def test_sigterm_under_load_finishes_the_requests_in_flight(self):
        rng = random.Random(5)
        # 32 texts of 512 tokens: 16k tokens, one forward of a while
        slow = {"inputs": [[sentence(rng, 400)] for _ in range(32)], "truncate": True}
        bodies = request_bodies(seed=11)
        with Server(CLASSIFY) as server:
            status, slow_answer = post(server, "/predict", slow)
            self.assertEqual(status, 200, slow_answer)
            expected = [post(server, "/predict", body)[1] for body in bodies]
            in_flight = []

            def slow_client():
                try:
                    status, answer = post(server, "/predict", slow, timeout=120)
                except (urllib.error.URLError, ConnectionError) as error:
                    status, answer = "error", str(error)
                in_flight.append((status, answer, time.monotonic()))

            slow_threads = [threading.Thread(target=slow_client) for _ in range(6)]
            for t in slow_threads:
                t.start()
            # Until the six slow requests are all admitted, before any other client starts: requests in flight
            # then counts only them.
            deadline = time.monotonic() + 30
            while True:
                _, metrics = request(server, "/metrics")
                if metric(metrics, "flashdeberta_requests_in_flight") >= 6 or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            background = []
            background_threads = run_clients(server, bodies, expected, 16, 200, background)
            while not background and time.monotonic() < deadline:  # the background clients under way
                time.sleep(0.01)
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            status = server.stop(sig=None, timeout=120)  # one signal: a second one exits without waiting
            for t in slow_threads + background_threads:
                t.join()
            self.assertEqual(status, 0, server.stderr())
            self.assertIn("SIGTERM: answering the requests in flight, then exiting", server.stderr())
            self.assertEqual(len(in_flight), 6)
            for got_status, answer, _ in in_flight:
                self.assertEqual(got_status, 200, answer)
                self.assertTrue(close(answer, slow_answer, SAME_RUN))
            finished_after = sum(1 for _, _, at in in_flight if at > signalled)
            self.assertGreater(finished_after, 0, "every large request was answered before the signal")
            # The background clients: right answers, or no connection once the server had stopped accepting.
            for outcome in background:
                if outcome[0] == 200:
                    self.assertTrue(outcome[1])
                else:
                    self.assertEqual(outcome[0], "error", outcome)
                    self.assertGreater(outcome[2], signalled, outcome)
            answered = sum(1 for o in background if o[0] == 200)
            print(f"\nSIGTERM with 6 large requests in flight: all 6 answered ({finished_after} after the signal); "
                  f"{answered} background requests answered, {len(background) - answered} clients refused after it")


if __name__ == "__main__":
    unittest.main(verbosity=2)
