"""What a round costs and how many tokens to draft: the k policies, the calibrated verification costs v(n),
and the CPU kernel plan and thread choice those costs are measured under.
"""
