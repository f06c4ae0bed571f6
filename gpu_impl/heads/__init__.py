"""Training the prediction-heads draft (`drafts.heads`): the offline corpus, the self-distillation loop and
the `exactspec train-heads` command.
"""
