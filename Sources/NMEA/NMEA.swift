public enum NMEAPlaceholderToRemove {}
