"""Teams and their members: who may submit, and whose results a submission counts for."""
