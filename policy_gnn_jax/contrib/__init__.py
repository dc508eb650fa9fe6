"""Research built on the library. The core package never imports anything from here."""
