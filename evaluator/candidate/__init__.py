"""What runs in a process where bundle code runs: as little as possible.

A runner calls `solution(...)` on the inputs its judge wrote into a shared arena and
copies what it returns into the arena's output slots. It makes no input, holds no seed,
stamps no clock that counts and compares nothing: everything that decides a score is in
`evaluator.judge`, in processes bundle code never reaches. The reference is timed by the
same runner code in a process of its own that never imports bundle code, so both sides of
a speedup pay for exactly the same harness.
"""
