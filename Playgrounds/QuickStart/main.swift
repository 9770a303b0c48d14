import LoadableKit

print("QuickStart: placeholder")
