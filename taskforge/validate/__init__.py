"""Validate one candidate deletion in the sandbox: the validation contract, as picklable jobs."""
