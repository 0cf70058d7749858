public enum GeodesyPlaceholderToRemove {}
