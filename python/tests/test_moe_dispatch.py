"""The routing logic of bench/e2e/moe_dispatch.py (routing, split sizes, the
rows each rank receives), which its outputs are checked against; standard
library only (the module imports torch only in main). Run as a plain
process (the Go test cmd/libsymmem runs it)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "e2e"))
import moe_dispatch as moe  # noqa: E402


def brute_force(routings, experts, ranks, rank):
    """What rank receives, straight from the definition: from each source
    in rank order, its (token, expert) pairs whose expert rank owns, by
    expert, then token."""
    per = experts // ranks
    out = []
    for i, rt in enumerate(routings):
        pairs = sorted((e, t) for t, es in enumerate(rt) for e in es if e // per == rank)
        out += [(i, t) for _, t in pairs]
    return out


class Routing(unittest.TestCase):
    def test_route(self):
        rt = moe.route(7, 1, 50, 16, 4)
        self.assertEqual(len(rt), 50)
        for es in rt:
            self.assertEqual(len(set(es)), 4, "a token's experts are distinct")
            self.assertTrue(all(0 <= e < 16 for e in es))
        self.assertEqual(rt, moe.route(7, 1, 50, 16, 4), "the same seed and rank route alike")
        self.assertNotEqual(rt, moe.route(7, 2, 50, 16, 4), "ranks route differently")
        with self.assertRaisesRegex(ValueError, "top-5 of 4"):
            moe.route(1, 0, 1, 4, 5)

    def test_plan(self):
        # 4 experts on 2 ranks: experts 0, 1 on rank 0; 2, 3 on rank 1.
        rows, send = moe.plan([[3, 0], [1, 2], [0, 3]], 4, 2)
        self.assertEqual(rows, [0, 2, 1, 1, 0, 2])  # experts 0 0 1 2 3 3
        self.assertEqual(send, [3, 3])
        rows, send = moe.plan([[0, 1]], 4, 2)
        self.assertEqual(send, [2, 0], "a rank sent nothing: a zero split")
        with self.assertRaisesRegex(ValueError, "6 experts do not split evenly over 4 ranks"):
            moe.plan([[0]], 6, 4)

    def test_expected_rows(self):
        for ranks, experts, tokens, topk in ((1, 8, 5, 2), (2, 16, 40, 4), (3, 12, 30, 3), (4, 256, 64, 8)):
            routings = [moe.route(3, r, tokens, experts, topk) for r in range(ranks)]
            plans = [moe.plan(rt, experts, ranks) for rt in routings]
            for rows, send in plans:
                self.assertEqual(sum(send), tokens * topk)
                self.assertEqual(len(rows), tokens * topk)
            total = 0
            for r in range(ranks):
                got = moe.expected_rows(plans, r)
                self.assertEqual(got, brute_force(routings, experts, ranks, r), (ranks, r))
                self.assertEqual(len(got), sum(moe.recv_counts(plans, r)))
                total += len(got)
            self.assertEqual(total, ranks * tokens * topk, "every row lands on one rank")
            self.assertEqual(moe.capacity(plans), max(sum(moe.recv_counts(plans, r)) for r in range(ranks)))

    def test_combine_restores(self):
        """Combine (the reverse all-to-all with send and receive swapped)
        gives each source its dispatch input back, row for row."""
        ranks, experts = 3, 6
        plans = [moe.plan(moe.route(5, r, 20, experts, 2), experts, ranks) for r in range(ranks)]
        received = [moe.expected_rows(plans, r) for r in range(ranks)]
        for i in range(ranks):
            back = []
            for r in range(ranks):  # rank r returns its block from i, in order
                start = sum(moe.recv_counts(plans, r)[:i])
                back += received[r][start:start + plans[i][1][r]]
            self.assertEqual(back, [(i, t) for t in plans[i][0]])


if __name__ == "__main__":
    unittest.main()
