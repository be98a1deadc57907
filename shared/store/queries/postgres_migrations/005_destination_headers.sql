-- hookline schema, version 5: custom request headers per destination, a JSON
-- object of name -> value, checked by shared/store/__init__.py (token names, printable values).
ALTER TABLE destinations ADD COLUMN headers text NOT NULL DEFAULT '{}';
