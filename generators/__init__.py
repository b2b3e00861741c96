"""Everything that reads a repository and proposes or produces tasks: sources, environment detection,
the static index, candidate discovery, feature-deletion transforms, problem statements."""
