"""The trusted side: code that never runs in a process where bundle code has run.

A judge rank makes every input from a seed only it holds, writes it into a shared arena
for its runners (the reference's and the candidate's), stamps the clock that counts on its
own timeline around each round, reads the outputs back as plain bytes of the shapes the
reference produced, and compares them. Nothing a runner says is more than validated data.
"""
