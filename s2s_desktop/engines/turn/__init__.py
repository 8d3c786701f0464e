"""End-of-turn models: did the speaker finish, or only pause?"""
