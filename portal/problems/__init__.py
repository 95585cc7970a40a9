"""The database mirror of the problem catalog, for admins to publish, hide, retire, weigh."""
