"""Task images: built with buildah on local bases, mounted for the sandbox."""
