"""The ground floor: value types, errors, settings, files, processes, patches. Imports nothing else of the project."""
