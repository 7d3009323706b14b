"""Memory as pure logic: settings, entries, windows and what a turn reads and keeps."""
