import os
import sys

# import dpfl from this checkout (python/), whatever the working directory
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
