"""tokenize"""
