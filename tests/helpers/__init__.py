"""What several test modules share and that is not a fixture every test may want (those live in
tests/conftest.py): each module here is about one part of the app, imported by the tests of it."""
