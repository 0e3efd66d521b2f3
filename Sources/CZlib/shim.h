// The system's zlib, for the App Store reports' gzip (Sources/AppStore/Reports/Gzip.swift).
#include <zlib.h>
