"""The reward: grade a patch in a fresh sandbox, with the authority on outcomes outside the graded process."""
