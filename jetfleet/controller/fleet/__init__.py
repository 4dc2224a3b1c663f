"""The lab as one power budget: a queue of jobs placed across the boards under a cap (``scheduler``), their
modes chosen jointly (``knapsack``)."""
